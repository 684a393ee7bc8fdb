package exec

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/foreman-sched/foreman/fsm"
)

// Job results and inputs (issue 15). A job may write up to fsm.ResultMax
// bytes to its result file: /foreman/result in a container,
// $FOREMAN_RESULT for the process driver. The supervisor reads it when the
// job has ended and puts it into result.json, so it travels with the
// finish report into raft (and survives the node). A child's parents'
// results are written by the worker before the supervisor starts, as
// <inputs>/<parent name>/result: /foreman/inputs in a container,
// $FOREMAN_INPUTS for the process driver.

// Paths inside the attempt directory and inside a container.
const (
	IODirName           = "foreman" // <attempt dir>/foreman/{result,inputs/}
	ResultName          = "result"
	InputsName          = "inputs"
	ContainerResultPath = "/foreman/result"
	ContainerInputsDir  = "/foreman/inputs"
)

// Input is one parent's result handed to a child.
type Input struct {
	Name   string // the directory name: the parent's name (or its ID)
	Result []byte
	// JobID, Attempt and Node name the parent's deciding attempt, whose
	// Artifacts are copied under <Name>/artifacts/ (artifacts.go).
	JobID     string
	Attempt   int
	Node      string
	Artifacts []fsm.Artifact
	// Outputs says where else the parent's files are (an object store);
	// nil: only on Node.
	Outputs *fsm.Outputs
}

// resultPath and inputsDir are the host paths of an attempt's result file
// and inputs directory.
func resultPath(dir string) string { return filepath.Join(dir, IODirName, ResultName) }
func inputsDir(dir string) string  { return filepath.Join(dir, IODirName, InputsName) }

// prepareIO creates the (empty) result file and the inputs, and returns
// the environment that tells the job where they are (container paths for
// every driver but process).
func prepareIO(dir, driver string, inputs []Input) ([]string, error) {
	io := filepath.Join(dir, IODirName)
	if err := os.Mkdir(io, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	// World-writable like /tmp: the job may run as any user.
	f, err := os.OpenFile(resultPath(dir), os.O_CREATE|os.O_TRUNC|os.O_WRONLY|syscall.O_NOFOLLOW, 0o666)
	if err != nil {
		return nil, err
	}
	f.Close()
	if err := os.Chmod(resultPath(dir), 0o666); err != nil {
		return nil, err
	}
	if err := os.Mkdir(inputsDir(dir), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	if err := os.Mkdir(artifactsDir(dir), 0o777); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	if err := os.Chmod(artifactsDir(dir), 0o777); err != nil { // past the umask
		return nil, err
	}
	for _, in := range inputs {
		if in.Name == "" || in.Name == "." || in.Name == ".." || filepath.Base(in.Name) != in.Name {
			continue // fsm.ValidJobName keeps workflow names safe; IDs are too
		}
		d := filepath.Join(inputsDir(dir), in.Name)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(d, ResultName), in.Result, 0o644); err != nil {
			return nil, err
		}
	}
	if driver == "process" {
		return []string{"FOREMAN_RESULT=" + resultPath(dir), "FOREMAN_INPUTS=" + inputsDir(dir), "FOREMAN_ARTIFACTS=" + artifactsDir(dir)}, nil
	}
	return []string{"FOREMAN_RESULT=" + ContainerResultPath, "FOREMAN_INPUTS=" + ContainerInputsDir, "FOREMAN_ARTIFACTS=" + ContainerArtifactsDir}, nil
}

// readResultFile reads what the job wrote, at most fsm.ResultMax bytes;
// truncated says there was more. It never follows a symlink (a job could
// otherwise make the supervisor publish any file it can read) and reads
// only a regular file.
func readResultFile(dir string) (data []byte, truncated bool, err error) {
	f, err := os.OpenFile(resultPath(dir), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if !st.Mode().IsRegular() {
		return nil, false, errors.New("the result is not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, fsm.ResultMax+1))
	if err != nil {
		return nil, false, err
	}
	if len(b) > fsm.ResultMax {
		return b[:fsm.ResultMax], true, nil
	}
	return b, false, nil
}
