package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// JobGPUUsage is what a running attempt's processes use on each GPU it
// holds (GET /v1/jobs/{id}/gpu-usage), measured by the node that runs it
// from nvidia-smi (compute-apps for memory, pmon for SM time), the
// processes matched to the job by their FOREMAN_JOB_ID. Node-local, never
// in raft: other nodes proxy the read, as for logs.
type JobGPUUsage = api.JobGPUUsage

// GPUDeviceUse is one device of the attempt.
type GPUDeviceUse = api.GPUDeviceUse

// MeasureJobGPUUsage fills a JobGPUUsage for attempt num of job on this
// node from m (shared with the client agent's port, which has no API).
func MeasureJobGPUUsage(m GPUUsage, job string, num int, node string, gpus []fsm.GPU) (*JobGPUUsage, error) {
	out := &JobGPUUsage{JobID: job, Attempt: num, Node: node, Devices: []GPUDeviceUse{}}
	if len(gpus) == 0 {
		out.Note = "the attempt holds no GPU"
		return out, nil
	}
	if m == nil {
		return nil, fmt.Errorf("%w: node %s measures no GPU use", ErrUnavailable, node)
	}
	uuids := make([]string, len(gpus))
	for i, g := range gpus {
		uuids[i] = g.UUID
	}
	devs, at, note, err := m.JobGPUUsage(job, uuids)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	out.At, out.Note = at.UTC(), note
	for i, d := range devs {
		if i < len(gpus) {
			d.Index = gpus[i].Index
		}
		out.Devices = append(out.Devices, d)
	}
	return out, nil
}

// jobGPUUsage handles GET /v1/jobs/{id}/gpu-usage?attempt=N (default: the
// latest attempt), which must be live: measured on its node, proxied there
// from any other.
func (s *server) jobGPUUsage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	at, node, err := s.attemptAndNode(r, id, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	num := at.Num
	if !at.State.Live() {
		s.writeError(w, r, fmt.Errorf("%w: attempt %d of job %s is %s: GPU use is measured while an attempt runs", fsm.ErrConflict, num, id, at.State))
		return
	}
	gpus := at.Devices()
	if at.Node != s.cluster.NodeName() && len(gpus) > 0 {
		q := r.URL.Query()
		q.Set("attempt", strconv.Itoa(num)) // a client agent serves the attempt named
		r.URL.RawQuery = q.Encode()
		s.proxy(w, r, at.Node, node.HTTPAddr)
		return
	}
	out, err := MeasureJobGPUUsage(s.gpuUsage, id, num, at.Node, gpus)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
