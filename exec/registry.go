package exec

import (
	"fmt"
	"sort"
	"sync"
)

// The driver registry is process-wide because the supervisor (a separate
// process started as `foreman supervise`) must find drivers by name without
// any wiring of its own: main registers the container driver before it
// dispatches to SuperviseMain or starts the agent. The process and HTTP
// drivers are always present.
var registry = struct {
	sync.RWMutex
	m map[string]Driver
}{m: map[string]Driver{ProcessDriverName: NewProcessDriver(), HTTPDriverName: NewHTTPDriver()}}

// RegisterDriver makes d available under d.Name(), replacing any driver of
// the same name. Call it from main before starting the worker or supervisor.
func RegisterDriver(d Driver) {
	registry.Lock()
	defer registry.Unlock()
	registry.m[d.Name()] = d
}

// Drivers returns every registered driver, sorted by name.
func Drivers() []Driver {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]Driver, 0, len(registry.m))
	for _, d := range registry.m {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// LookupDriver returns the driver registered under name.
func LookupDriver(name string) (Driver, error) {
	registry.RLock()
	defer registry.RUnlock()
	d, ok := registry.m[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownDriver, name)
	}
	return d, nil
}

// DetectDrivers reports which registered drivers can run on this host: the
// names of the usable ones (sorted, for fsm.Node.Drivers) and, for the rest,
// why not (for the agent's start-up log).
func DetectDrivers() (usable []string, unusable map[string]error) {
	unusable = map[string]error{}
	for _, d := range Drivers() {
		if err := d.Available(); err != nil {
			unusable[d.Name()] = err
			continue
		}
		usable = append(usable, d.Name())
	}
	return usable, unusable
}
