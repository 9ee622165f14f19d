%% A gen_server that owns one Python port program, as ErlPort's python:start does:
%% open_port({spawn_executable, Python}, [{packet, 4}, binary, exit_status]).
%%
%% Two roles share it: {face_server, Index} runs the Haar detector (the paper's
%% face_server); aggregator_server the deque of recent faces and the pan/tilt decision.
%% Messages are the pipeline's wire bytes, opaque here; the port program answers "Y" once
%% loaded (ready) and "O" ++ Output for each output: a face server's result goes to the
%% aggregator, the aggregator's outputs (already tagged for the harness) to camera_link.
%%
%% It traps exits, so exit(Pid, shutdown) (the chaos monkey's SIGTERM) runs terminate/2
%% and closes the port; exit(Pid, kill) (SIGKILL) cannot be trapped, and the port,
%% linked to it, is closed by the VM. Either way the program sees end of input and exits.
-module(python_server).
-behaviour(gen_server).
-export([start_link/2, name/1, input/2]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

-define(PROGRAM, "roboscale.facetrack.stacks.port_program").

start_link(Role, Args) ->
    Name = name(Role),
    await_predecessor(Name),
    gen_server:start_link({local, Name}, ?MODULE, {Role, Args}, []).

%% A killed face_supervisor's workers get its exit signal and close their ports in
%% terminate/2 while the restarted supervisor already starts their successors under the
%% same registered names. Starting at once would fail with already_started, the
%% supervisor would retry at once, and a thousand failed retries in a second end the
%% whole tree (top_supervisor's intensity). So the successor waits for its predecessor
%% to end, which the restart time then includes, as it would in the paper's tree.
await_predecessor(Name) ->
    case whereis(Name) of
        undefined -> ok;
        Pid ->
            Ref = erlang:monitor(process, Pid),
            receive {'DOWN', Ref, process, Pid, _} -> ok
            after 5000 -> erlang:demonitor(Ref, [flush]), ok
            end
    end.

name({face_server, Index}) -> list_to_atom("face_server_" ++ integer_to_list(Index));
name(Role) -> Role.

input(Name, Bin) -> gen_server:cast(Name, {input, Bin}).

init({Role, #{python := Python, config := Config}}) ->
    Started = erlang:monotonic_time(),  % the restart figure: kill until this line
    process_flag(trap_exit, true),
    Port = open_port({spawn_executable, Python},
                     [{args, ["-P", "-m", ?PROGRAM | program_args(Role)] ++ [Config]},
                      {packet, 4}, binary, exit_status, use_stdio]),
    {os_pid, OsPid} = erlang:port_info(Port, os_pid),
    camera_link:up(Role, OsPid, init, Started),
    {ok, #{role => Role, port => Port, os_pid => OsPid}}.

program_args({face_server, Index}) -> ["detector", integer_to_list(Index)];
program_args(aggregator_server) -> ["aggregator", "0"].

handle_call(_Request, _From, State) -> {reply, ok, State}.

handle_cast({input, Bin}, #{port := Port} = State) ->
    true = erlang:port_command(Port, Bin),
    {noreply, State}.

handle_info({Port, {data, <<"O", Out/binary>>}}, #{port := Port, role := Role} = State) ->
    forward(Role, Out),
    {noreply, State};
handle_info({Port, {data, <<"Y">>}}, #{port := Port, role := Role, os_pid := OsPid} = State) ->
    camera_link:up(Role, OsPid, ready, erlang:monotonic_time()),
    {noreply, State};
handle_info({Port, {data, _Malformed}}, #{port := Port} = State) ->
    camera_link:malformed(),
    {noreply, State};
handle_info({Port, {exit_status, Status}}, #{port := Port} = State) ->
    {stop, {port_exit, Status}, State};
handle_info({'EXIT', Port, Reason}, #{port := Port} = State) ->
    {stop, {port_closed, Reason}, State};
handle_info({'EXIT', _From, Reason}, State) ->
    %% An exit signal from the chaos monkey (the parent's is handled by gen_server).
    {stop, Reason, State};
handle_info(_Other, State) ->
    {noreply, State}.

terminate(_Reason, #{port := Port}) ->
    catch erlang:port_close(Port),
    ok.

forward({face_server, _Index}, Result) ->
    input(aggregator_server, Result);
forward(aggregator_server, Output) ->
    camera_link:output(Output).
