%% Erlang/OTP restart baseline for bench/restart_baselines.py.
%%
%% A one_for_one supervisor with restart intensity 1000 in 1 s (the face
%% tracker paper's top_supervisor) over W permanent gen_server workers. The
%% killer picks a random worker, takes erlang:monotonic_time(), sends
%% exit(Pid, kill) and waits for the replacement's init/1 to report its own
%% monotonic_time(). Kill-until-new-child-init is printed in microseconds, as
%% one JSON object on stdout.
%%
%%   erlc -o DIR otp_restart.erl && erl -noshell -pa DIR -run otp_restart main KILLS WORKERS
-module(otp_restart).
-behaviour(supervisor).
%% Workers are gen_servers of this same module too; only one behaviour attribute,
%% since both declare init/1 (told apart by its argument below).

-export([main/1, start_worker/1]).
-export([init/1, handle_call/3, handle_cast/2]).

-define(COLLECTOR, otp_restart_collector).
-define(WAIT_MS, 5000).
-define(WARMUP_KILLS, 10).

main([KillsArg, WorkersArg]) ->
    Kills = list_to_integer(KillsArg),
    Workers = list_to_integer(WorkersArg),
    %% Each restart would log a supervisor report; the figure is the restart, not the log.
    logger:set_primary_config(level, critical),
    register(?COLLECTOR, self()),
    {ok, Sup} = supervisor:start_link(?MODULE, {top, Workers}),
    [receive {init, _, _, _} -> ok after ?WAIT_MS -> fail("worker start") end
     || _ <- lists:seq(1, Workers)],
    _ = [kill_one(Sup) || _ <- lists:seq(1, ?WARMUP_KILLS)],  % loads code paths, not counted
    Samples = [kill_one(Sup) || _ <- lists:seq(1, Kills)],
    io:put_chars(json(Workers, Kills, Samples)),
    halt(0).

%% One kill: the time from exit(Pid, kill) to the new worker's init, in microseconds.
kill_one(Sup) ->
    timer:sleep(1),  % stays well below the intensity of 1000 restarts per second
    Children = supervisor:which_children(Sup),
    {Id, Pid, worker, _} = lists:nth(rand:uniform(length(Children)), Children),
    T0 = erlang:monotonic_time(),
    exit(Pid, kill),
    receive
        {init, Id, NewPid, T1} when NewPid =/= Pid ->
            erlang:convert_time_unit(T1 - T0, native, nanosecond) / 1000.0
    after ?WAIT_MS ->
        fail("restart")
    end.

fail(What) ->
    io:format(standard_error, "otp_restart: no ~s within ~p ms~n", [What, ?WAIT_MS]),
    halt(1).

start_worker(Id) ->
    gen_server:start_link(?MODULE, {worker, Id}, []).

%% supervisor and gen_server callbacks share init/1, told apart by their argument.
init({top, Workers}) ->
    Flags = #{strategy => one_for_one, intensity => 1000, period => 1},
    Specs = [#{id => N, start => {?MODULE, start_worker, [N]}, restart => permanent,
               shutdown => 5000, type => worker}
             || N <- lists:seq(1, Workers)],
    {ok, {Flags, Specs}};
init({worker, Id}) ->
    ?COLLECTOR ! {init, Id, self(), erlang:monotonic_time()},
    {ok, Id}.

handle_call(_Request, _From, State) -> {reply, ok, State}.
handle_cast(_Request, State) -> {noreply, State}.

json(Workers, Kills, Samples) ->
    Numbers = string:join([float_to_list(S, [{decimals, 3}]) || S <- Samples], ","),
    lists:flatten(io_lib:format(
        "{\"otp_release\": \"~s\", \"erts\": \"~s\", \"workers\": ~p, \"kills\": ~p, "
        "\"warmup_kills\": ~p, \"restart_us\": [~s]}~n",
        [erlang:system_info(otp_release), erlang:system_info(version), Workers, Kills,
         ?WARMUP_KILLS, Numbers])).
