%% The paper's top_supervisor: one_for_one, intensity 1000 restarts in 1 s (Table 2).
%% Children start in order: the harness link first (every later child reports to it),
%% then the aggregator branch and the face workers.
-module(top_supervisor).
-behaviour(supervisor).
-export([start_link/1, init/1]).

start_link(Args) ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, Args).

init(Args) ->
    Flags = #{strategy => one_for_one, intensity => 1000, period => 1},
    Children =
        [#{id => camera_link, start => {camera_link, start_link, [Args]},
           %% The harness accepts one connection: a lost link ends the run (facetrack keeps).
           restart => temporary, shutdown => 2000, type => worker},
         #{id => aggregator_supervisor, start => {aggregator_supervisor, start_link, [Args]},
           restart => permanent, shutdown => infinity, type => supervisor},
         #{id => face_supervisor, start => {face_supervisor, start_link, [Args]},
           restart => permanent, shutdown => infinity, type => supervisor}],
    {ok, {Flags, Children}}.
