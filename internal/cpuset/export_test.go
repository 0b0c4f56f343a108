package cpuset

// Threads lists the process's thread IDs, for tests.
var Threads = threads
