package cli

import (
	"strings"

	"github.com/foreman-sched/foreman/fsm"
)

// depsLine is `job status`'s "Depends on:": each parent with its own
// requirement (after), or all of them under one condition, then the
// decision once taken ("01JA (ok), 01JB (any) · released by 01JB").
func depsLine(parents []string, after []fsm.AfterDep, condition string, deps *fsm.Deps) string {
	on := make(map[string]string, len(after))
	for _, a := range after {
		on[a.Job] = string(a.On)
	}
	var b strings.Builder
	for i, p := range parents {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p)
		if r, ok := on[p]; ok {
			b.WriteString(" (" + r + ")")
		}
	}
	if len(after) == 0 {
		if condition == "" {
			condition = string(fsm.ConditionSuccess)
		}
		b.WriteString(" · " + condition)
	}
	if deps != nil && deps.Decision != "" {
		b.WriteString(" · " + deps.Decision + " by " + deps.DecidedBy)
	}
	return b.String()
}
