%% The tree's link to the Python harness, which plays the camera and chooses each
%% frame's worker (the same seeded dispatcher in every stack): one loopback TCP
%% connection with 4-byte length framing ({packet, 4}).
%%
%% Harness to tree:  "F" Worker:32 Frame          cast a frame (wire bytes) to face_server Worker
%%                   "K" Method:8 Role:8 Index:32 kill a process (Method 0 shutdown, 1 kill)
%%                   "S"                          ask for memory figures
%%                   "Q"                          stop the tree and the VM
%% Tree to harness:  "H" OsPid:32 Release         hello: the VM's OS pid, the OTP release
%%                   "U" Role:8 Index:32 OsPid:32 Phase:8 T:64 SinceKill:64
%%                                                a process started (Phase 0) or is ready (1);
%%                                                SinceKill: ns from its predecessor's kill, or -1
%%                   "N" Role:8 Index:32          a kill found no such process (restarting)
%%                   "O" Output                   the aggregator's output, tagged for the harness
%%                   "M" Total:64 Malformed:32 {Role:8 Index:32 Memory:64}*
%%                                                VM memory, dropped messages, per-process memory
%% Roles: 0 face_server, 2 aggregator_server, 5 face_supervisor, 6 aggregator_supervisor.
%%
%% A frame cast to a face_server that is down between its kill and its restart is lost,
%% as in the paper. Kill-until-init is measured here: erlang:monotonic_time() just before
%% exit/2, and the new process's own stamp at the top of its init/1.
-module(camera_link).
-behaviour(gen_server).
-export([start_link/1, up/4, started/1, output/1, malformed/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

start_link(Args) ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, Args, []).

%% A process of the tree reached Phase (init | ready) at monotonic time T.
up(Role, OsPid, Phase, T) -> gen_server:cast(?MODULE, {up, Role, OsPid, Phase, T}).

%% A process without a port program (a supervisor): started and ready at once.
started(Role) ->
    T = erlang:monotonic_time(),
    up(Role, 0, init, T),
    up(Role, 0, ready, T).

output(Output) -> gen_server:cast(?MODULE, {output, Output}).
malformed() -> gen_server:cast(?MODULE, malformed).

init(#{harness_port := Port, workers := Workers}) ->
    Options = [binary, {packet, 4}, {active, true}, {nodelay, true}],
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, Port, Options, 10000),
    Release = list_to_binary(erlang:system_info(otp_release)),
    OsPid = list_to_integer(os:getpid()),
    ok = gen_tcp:send(Sock, <<"H", OsPid:32, Release/binary>>),
    Names = list_to_tuple([name({face_server, I}) || I <- lists:seq(0, Workers - 1)]),
    {ok, #{sock => Sock, names => Names, killed => #{}, malformed => 0}}.

handle_call(_Request, _From, State) -> {reply, ok, State}.

handle_cast({up, Role, OsPid, Phase, T}, #{sock := Sock, killed := Killed} = State) ->
    SinceKill = case Killed of
                    #{Role := T0} -> erlang:convert_time_unit(T - T0, native, nanosecond);
                    #{} -> -1
                end,
    {Code, Index} = role_code(Role),
    Event = <<"U", Code:8, Index:32/signed, OsPid:32, (phase_code(Phase)):8,
              (erlang:convert_time_unit(T, native, nanosecond)):64/signed, SinceKill:64/signed>>,
    ok = gen_tcp:send(Sock, Event),
    Left = case Phase of ready -> maps:remove(Role, Killed); init -> Killed end,
    {noreply, State#{killed := Left}};
handle_cast({output, Output}, #{sock := Sock} = State) ->
    ok = gen_tcp:send(Sock, <<"O", Output/binary>>),
    {noreply, State};
handle_cast(malformed, State) ->
    {noreply, count_malformed(State)}.

handle_info({tcp, _Sock, <<"F", Worker:32, Frame/binary>>}, #{names := Names} = State)
  when Worker < tuple_size(Names) ->
    python_server:input(element(Worker + 1, Names), Frame),
    {noreply, State};
handle_info({tcp, _Sock, <<"K", Method:8, Code:8, Index:32/signed>>}, State) ->
    {noreply, kill(Method, code_role(Code, Index), State)};
handle_info({tcp, Sock, <<"S">>}, #{malformed := Malformed} = State) ->
    ok = gen_tcp:send(Sock, <<"M", (erlang:memory(total)):64, Malformed:32,
                              (memory_of_servers())/binary>>),
    {noreply, State};
handle_info({tcp, _Sock, <<"Q">>}, State) ->
    {stop, normal, State};
handle_info({tcp, _Sock, _Malformed}, State) ->
    {noreply, count_malformed(State)};
handle_info({tcp_closed, _Sock}, State) ->
    {stop, normal, State};
handle_info(_Other, State) ->
    {noreply, State}.

count_malformed(#{malformed := N} = State) -> State#{malformed := N + 1}.

kill(_Method, undefined, State) ->
    count_malformed(State);
kill(Method, Role, #{sock := Sock, killed := Killed} = State) ->
    case whereis(name(Role)) of
        undefined ->
            {Code, Index} = role_code(Role),
            ok = gen_tcp:send(Sock, <<"N", Code:8, Index:32/signed>>),
            State;
        Pid ->
            T0 = erlang:monotonic_time(),
            exit(Pid, case Method of 1 -> kill; _ -> shutdown end),
            State#{killed := Killed#{Role => T0}}
    end.

name({face_server, _} = Role) -> python_server:name(Role);
name(Role) -> Role.

memory_of_servers() ->
    Roles = face_servers() ++ [aggregator_server],
    << <<Code:8, Index:32/signed, Memory:64>>
       || Role <- Roles,
          Pid <- [whereis(name(Role))], is_pid(Pid),
          {memory, Memory} <- [erlang:process_info(Pid, memory)],
          {Code, Index} <- [role_code(Role)] >>.

%% The face servers of the running face_supervisor; none while it is being restarted
%% (a call to it then would end this link, and the run with it).
face_servers() ->
    try supervisor:which_children(face_supervisor) of
        Children -> [Id || {{face_server, _} = Id, _, _, _} <- Children]
    catch exit:_ -> []
    end.

phase_code(init) -> 0;
phase_code(ready) -> 1.

role_code({face_server, Index}) -> {0, Index};
role_code(aggregator_server) -> {2, 0};
role_code(face_supervisor) -> {5, 0};
role_code(aggregator_supervisor) -> {6, 0}.

code_role(0, Index) when Index >= 0 -> {face_server, Index};
code_role(2, _) -> aggregator_server;
code_role(5, _) -> face_supervisor;
code_role(6, _) -> aggregator_supervisor;
code_role(_, _) -> undefined.
