// Package agent is `foreman agent`: one agent's flags, wiring and lifetime.
//
// Its flags become every subsystem's Config; it wires fsm, cluster, sched,
// exec, httpapi and ui together, with the adapters that hand concrete types
// to the small interfaces those packages declare, so that they never import
// each other.
package agent
