package exec

import (
	"context"
	"os"
	"path/filepath"
	"time"
)

// adopt runs once when the worker starts: it reconnects to every live
// supervisor (renewing its lease before it expires), reports results that
// finished while no agent was running, and lets drivers remove leftovers
// that belong to no live supervisor.
func (w *Worker) adopt(ctx context.Context) {
	entries, err := os.ReadDir(w.attemptsDir)
	if err != nil {
		w.log.Warn("read attempts dir", "err", err)
	}
	live := map[string]bool{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		id, dir := e.Name(), filepath.Join(w.attemptsDir, e.Name())
		if exists(filepath.Join(dir, ReportedName)) {
			continue
		}
		if w.adoptDir(ctx, id, dir) {
			live[id] = true
		}
	}
	w.removeStaleDeviceCgroups(live)
	for _, d := range Drivers() {
		if c, ok := d.(OrphanCleaner); ok {
			if err := c.CleanupOrphans(live); err != nil {
				w.log.Warn("driver cleanup", "driver", d.Name(), "err", err)
			}
		}
	}
	w.collectGarbage()
}

// collectGarbage removes attempt dirs whose result was reported more than
// KeepFinished ago. Logs are served from these dirs until then.
func (w *Worker) collectGarbage() {
	entries, err := os.ReadDir(w.attemptsDir)
	if err != nil {
		return
	}
	cutoff := time.Now().Add(-w.cfg.KeepFinished)
	for _, e := range entries {
		dir := filepath.Join(w.attemptsDir, e.Name())
		fi, err := os.Stat(filepath.Join(dir, ReportedName))
		if err != nil || fi.ModTime().After(cutoff) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			w.log.Warn("remove finished attempt", "dir", dir, "err", err)
		}
	}
}
