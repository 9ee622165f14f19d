%% The face tracker of Lutac et al. on Erlang/OTP: entry point.
%%
%%   erl -noinput +B -pa DIR -run facetrack start HARNESS_PORT WORKERS PYTHON CONFIG
%%
%% Starts the paper's supervision tree (top_supervisor) and a keeper that halts the
%% VM when the tree or the link to the harness goes away, so that nothing outlives
%% the harness: the harness is the camera and the one reader of the results.
-module(facetrack).
-export([start/1]).

start([PortArg, WorkersArg, Python, Config]) ->
    %% A killed worker makes its supervisor log a report; the chaos runs kill hundreds,
    %% and the figures are the restarts, not the log.
    logger:set_primary_config(level, critical),
    Args = #{harness_port => list_to_integer(PortArg),
             workers => list_to_integer(WorkersArg),
             python => Python,
             config => Config},
    Keeper = spawn(fun() -> keep(Args) end),
    register(facetrack_keeper, Keeper),
    ok.

keep(Args) ->
    process_flag(trap_exit, true),
    case top_supervisor:start_link(Args) of
        {ok, Top} ->
            Link = erlang:monitor(process, camera_link),
            receive
                {'DOWN', Link, process, _, normal} -> stop(Top);
                {'DOWN', Link, process, _, Reason} -> halt_with("camera_link", Reason, 3);
                {'EXIT', Top, Reason} -> halt_with("top_supervisor", Reason, 1)
            end;
        {error, Reason} ->
            halt_with("top_supervisor start", Reason, 1)
    end.

%% The harness said goodbye: the tree stops in order (ports closed), then the VM.
stop(Top) ->
    exit(Top, shutdown),
    receive {'EXIT', Top, _} -> halt(0) after 5000 -> halt_with("shutdown", timeout, 4) end.

halt_with(What, Reason, Code) ->
    io:format(standard_error, "facetrack: ~s ended: ~p~n", [What, Reason]),
    halt(Code).
