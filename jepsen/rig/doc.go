// Package rig runs real foreman agents, one per network namespace, and
// gives the nemeses their levers: kill -9, restart from the same data
// directory, SIGSTOP/SIGCONT by PID, graceful stop, and new nodes.
package rig
