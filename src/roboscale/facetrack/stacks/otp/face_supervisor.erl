%% The paper's face_supervisor: N permanent face_server workers, one_for_one,
%% intensity 1000 in 1 s, shutdown 20 ms (Table 2).
-module(face_supervisor).
-behaviour(supervisor).
-export([start_link/1, init/1]).

start_link(Args) ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, Args).

init(#{workers := Workers} = Args) ->
    camera_link:started(face_supervisor),
    Flags = #{strategy => one_for_one, intensity => 1000, period => 1},
    Children =
        [#{id => {face_server, Index},
           start => {python_server, start_link, [{face_server, Index}, Args]},
           restart => permanent, shutdown => 20, type => worker}
         || Index <- lists:seq(0, Workers - 1)],
    {ok, {Flags, Children}}.
