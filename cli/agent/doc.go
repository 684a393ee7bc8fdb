// Package agent is `foreman agent`: its flags turned into every
// subsystem's Config, and the wiring and lifetime of one agent (fsm,
// cluster, sched, exec, httpapi, ui), with the adapters that hand concrete
// types to the small interfaces those packages declare, so that they never
// import each other.
package agent
