%% Idle Erlang processes, the memory anchor of bench/nodes.py.
%%
%% Spawns N processes that each wait in `receive` (the smallest process a program
%% keeps: no links, no state, OTP's default heap), after a garbage collection of the
%% caller, and prints one JSON object: the growth of the VM's resident set
%% (/proc/self/statm, what bench/nodes.py measures for the runtime's nodes too) and of
%% erlang:memory(processes) per process, one process's own process_info memory, and the
%% spawn time per process. Then it stops them and halts.
%%
%%   erlc -o DIR erl_idle.erl && erl -noshell -pa DIR -run erl_idle main N
-module(erl_idle).
-export([main/1]).

main([NArg]) ->
    N = list_to_integer(NArg),
    garbage_collect(),
    Rss0 = rss_bytes(),
    Mem0 = erlang:memory(processes),
    T0 = erlang:monotonic_time(),
    Pids = [spawn(fun idle/0) || _ <- lists:seq(1, N)],
    T1 = erlang:monotonic_time(),
    Rss1 = rss_bytes(),
    Mem1 = erlang:memory(processes),
    {memory, One} = erlang:process_info(hd(Pids), memory),
    SpawnNs = erlang:convert_time_unit(T1 - T0, native, nanosecond),
    io:format(
        "{\"otp_release\": \"~s\", \"processes\": ~p, \"rss_bytes_per_process\": ~.3f, "
        "\"vm_bytes_per_process\": ~.3f, \"process_info_bytes\": ~p, "
        "\"spawn_us_per_process\": ~.4f}~n",
        [erlang:system_info(otp_release), N, (Rss1 - Rss0) / N, (Mem1 - Mem0) / N, One,
         SpawnNs / N / 1000]),
    [P ! stop || P <- Pids],
    halt(0).

idle() ->
    receive stop -> ok end.

rss_bytes() ->
    {ok, Text} = file:read_file("/proc/self/statm"),
    [_Size, Resident | _] = string:split(binary_to_list(Text), " ", all),
    list_to_integer(Resident) * 4096.
