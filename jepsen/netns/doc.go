// Package netns builds the real tier's network: one Linux bridge, one
// network namespace per node joined to it by a veth pair, a private /24 with
// no default route and no NAT, and per-namespace iptables grudges. Every name
// carries Prefix so a best-effort Sweep can remove leftovers of a crashed run
// without touching anything else.
package netns
