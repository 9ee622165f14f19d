%% The paper's aggregator_supervisor: the aggregator_server, permanent, one_for_one. Its
%% port program keeps the deque of recent faces and decides the camera's pan and tilt
%% (the paper's aggregator called a Python tracking-control function the same way).
-module(aggregator_supervisor).
-behaviour(supervisor).
-export([start_link/1, init/1]).

start_link(Args) ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, Args).

init(Args) ->
    camera_link:started(aggregator_supervisor),
    Flags = #{strategy => one_for_one, intensity => 1000, period => 1},
    Children =
        [#{id => aggregator_server,
           start => {python_server, start_link, [aggregator_server, Args]},
           restart => permanent, shutdown => 20, type => worker}],
    {ok, {Flags, Children}}.
