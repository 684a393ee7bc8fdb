package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/foreman-sched/foreman/exec"
)

// withoutUnreachableProcess drops the process driver from usable (and
// records why in unusable) when a root agent's process jobs could not
// reach their attempt dirs: --job-default-user (nobody by default) cannot
// search a dir above the data dir (exec.CheckJobUserReach). Every process
// job placed here would fail at its start, attempt after attempt; like a
// Nomad client whose driver fails fingerprinting, the node instead does not
// offer the driver, so the scheduler holds process jobs with "driver
// process unavailable" (or places them where they can run) and the
// worker's start warning says which dir and how to fix it.
//
// The data dir is made first, its missing parents searchable as mkdir -p
// makes them: made 0700 with it (as opening the state would), they alone
// would lock the job user out.
func withoutUnreachableProcess(w *exec.WorkerConfig, usable []string, unusable map[string]error) []string {
	if os.Geteuid() != 0 || w.DefaultJobUser == "" {
		return usable // only root switches users
	}
	if err := os.MkdirAll(filepath.Dir(w.DataDir), 0o755); err != nil {
		return usable // opening the state reports it
	}
	if err := os.Mkdir(w.DataDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return usable
	}
	err := exec.CheckJobUserReach(w.DataDir, w.DefaultJobUser)
	if err == nil {
		return usable
	}
	unusable[exec.ProcessDriverName] = err
	return slices.DeleteFunc(usable, func(d string) bool { return d == exec.ProcessDriverName })
}
