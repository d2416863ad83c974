// Nothing may hang: an alarm-based watchdog ends the process (exit status 3,
// MPI jobs through the launcher) when no progress was reported for -T seconds.
// Each thread says what it is doing (a static string and its first rank), so
// the message names the stuck call and rank.
#pragma once

namespace perf {

// Arms the watchdog: `seconds` without kick() end the process (0: never).
void watchdogStart(const char* program, int seconds, int nthreads);
// Progress: re-arms the alarm.
void watchdogKick();
// What `thread` (whose first rank is `rank`) does now; `what` must be a static string.
void watchdogDoing(int thread, int rank, const char* what);
void watchdogStop();

}  // namespace perf
