package fsm

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Job arrays (`foreman submit --array 0-999[:STEP][%PARALLEL]`, Slurm's
// --array, Kubernetes' Indexed Jobs). An array is one job record whose
// spec carries Array; its tasks are jobs of their own (attempts, retries,
// logs, artifacts, result), with the ID ARRAY.INDEX, made only as the
// array runs: a 100,000-task array costs one record and one raft entry up
// front, not 100,000.
//
// The array record never queues. The moment it would (submitted, released
// by its parents or its run_at), it is running and makes its first tasks;
// after that every task's transition (in saveJob, the one place they all
// go through) moves the array's counts and makes more tasks in the same
// transaction: while fewer than ArrayQueueAhead of them wait in the queue
// and, with a PARALLEL bound, while fewer than that many are live. So the
// scheduler always finds tasks queued ahead of its free slots, a task is
// made about when an earlier one is placed, and no raft entry is spent on
// making tasks. The array's state is a function of its counts: running
// while a task is live or still to be made, then succeeded when every
// task succeeded, failed when any failed, else cancelled.

// MaxArraySize bounds the tasks of one array.
const MaxArraySize = 100_000

// ArrayQueueAhead is how many of an array's tasks may wait in the queue at
// once: more than a plan places per array between two entries, few enough
// that a submit writes little (1,000 records at most).
const ArrayQueueAhead = 1000

// Environment of every task (besides the FOREMAN_* every job gets).
const (
	EnvArrayID    = "FOREMAN_ARRAY_ID"
	EnvArrayIndex = "FOREMAN_ARRAY_INDEX"
	EnvArraySize  = "FOREMAN_ARRAY_SIZE"
)

// ArraySpec is the indexes of an array, Start to End (inclusive) by Step,
// and how many of its tasks may be live at once (0: no bound).
type ArraySpec struct {
	Start    int `json:"start"`
	End      int `json:"end"`
	Step     int `json:"step,omitempty"` // 0 means 1
	Parallel int `json:"parallel,omitempty"`
}

// ParseArray reads START-END[:STEP][%PARALLEL], or a single index N.
func ParseArray(s string) (ArraySpec, error) {
	var a ArraySpec
	body, par, hasPar := strings.Cut(s, "%")
	if hasPar {
		n, err := strconv.Atoi(par)
		if err != nil || n < 1 {
			return a, fmt.Errorf("%q: %%%s: must be a number of tasks, 1 or more (leave it out for no bound)", s, par)
		}
		a.Parallel = n
	}
	body, step, hasStep := strings.Cut(body, ":")
	if hasStep {
		n, err := strconv.Atoi(step)
		if err != nil || n < 1 {
			return a, fmt.Errorf("%q: step %q: must be a number, 1 or more", s, step)
		}
		a.Step = n
	}
	lo, hi, isRange := strings.Cut(body, "-")
	if !isRange {
		hi = lo
	}
	var err1, err2 error
	a.Start, err1 = strconv.Atoi(lo)
	a.End, err2 = strconv.Atoi(hi)
	if err1 != nil || err2 != nil {
		return a, fmt.Errorf("%q: want START-END[:STEP][%%PARALLEL], e.g. 0-999%%50", s)
	}
	return a, a.Check()
}

// String is the form --array takes.
func (a ArraySpec) String() string {
	s := fmt.Sprintf("%d-%d", a.Start, a.End)
	if a.Step > 1 {
		s += ":" + strconv.Itoa(a.Step)
	}
	if a.Parallel > 0 {
		s += "%" + strconv.Itoa(a.Parallel)
	}
	return s
}

func (a ArraySpec) step() int { return max(a.Step, 1) }

// Size is the number of tasks.
func (a ArraySpec) Size() int {
	if a.End < a.Start {
		return 0
	}
	return (a.End-a.Start)/a.step() + 1
}

// Index is the index of the task at position pos (0..Size-1).
func (a ArraySpec) Index(pos int) int { return a.Start + pos*a.step() }

// Position is where index i is among the tasks, or -1 when it is not one.
func (a ArraySpec) Position(i int) int {
	if i < a.Start || i > a.End || (i-a.Start)%a.step() != 0 {
		return -1
	}
	return (i - a.Start) / a.step()
}

// Check says what is wrong with a, naming the part.
func (a ArraySpec) Check() error {
	switch {
	case a.Start < 0:
		return fmt.Errorf("start %d: indexes are 0 or more", a.Start)
	case a.End < a.Start:
		return fmt.Errorf("%d-%d: the end is before the start", a.Start, a.End)
	case a.Step < 0:
		return fmt.Errorf("step %d: must be 1 or more", a.Step)
	case a.Parallel < 0:
		return fmt.Errorf("%%%d: must be 1 or more (leave it out for no bound)", a.Parallel)
	case a.End > 1_000_000_000:
		return fmt.Errorf("end %d: indexes are at most 1000000000", a.End)
	case a.Size() > MaxArraySize:
		return fmt.Errorf("%s is %d tasks (at most %d)", a, a.Size(), MaxArraySize)
	}
	return nil
}

// ArrayStatus follows the tasks of an array job.
type ArrayStatus struct {
	Size int `json:"size"`
	// Next is how many positions have been made (or passed over, when
	// excluded): the next task made is at position Next.
	Next int `json:"next,omitempty"`
	// Queued and Live count the made tasks that are queued and not
	// terminal; the rest count made tasks by their end (skipped ones,
	// which arrays' tasks never are, count as cancelled).
	Queued    int `json:"queued,omitempty"`
	Live      int `json:"live,omitempty"`
	Succeeded int `json:"succeeded,omitempty"`
	Failed    int `json:"failed,omitempty"`
	// Cancelled also counts the indexes cancelled before they were made.
	Cancelled int `json:"cancelled,omitempty"`
	// Stopped: the array was cancelled, nothing more is made; the
	// positions from Next on (but the excluded ones) are counted in
	// Cancelled.
	Stopped bool `json:"stopped,omitempty"`
	// Excluded lists the positions cancelled before they were made (`job
	// cancel ARRAY --indexes`), ascending, each counted in Cancelled:
	// never made until `job retry ARRAY --indexes` brings one back.
	Excluded []int `json:"excluded,omitempty"`
	// Redo: the array is being run again, and the positions from Next up
	// to Redo are made again if they did not succeed (restart).
	Redo int `json:"redo,omitempty"`
}

// Unmade is how many positions are still to be made (or, below Redo,
// looked at again).
func (s *ArrayStatus) Unmade() int {
	if s.Stopped {
		return 0
	}
	return s.Size - s.Next - s.excludedFrom(s.Next)
}

// excludedFrom counts the excluded positions at or after pos.
func (s *ArrayStatus) excludedFrom(pos int) int {
	return len(s.Excluded) - sort.SearchInts(s.Excluded, pos)
}

func (s *ArrayStatus) excluded(pos int) bool {
	_, found := slices.BinarySearch(s.Excluded, pos)
	return found
}

// stop makes nothing more: the positions never made (but the excluded
// ones) count as cancelled. Made tasks below Redo keep how they ended.
func (s *ArrayStatus) stop() {
	if s.Stopped {
		return
	}
	n := max(s.Next, s.Redo)
	s.Cancelled += s.Size - n - s.excludedFrom(n)
	s.Next, s.Redo, s.Stopped = n, 0, true
}

// restart runs the array again from its first position: a stop is
// undone and every made task that did not succeed is run again as fill
// passes it (the excluded positions stay excluded).
func (s *ArrayStatus) restart() {
	if s.Stopped {
		s.Cancelled -= s.Size - s.Next - s.excludedFrom(s.Next)
		s.Stopped = false
	}
	s.Redo, s.Next = max(s.Redo, s.Next), 0
}

// Done reports whether no task is live or still to be made.
func (s *ArrayStatus) Done() bool { return s.Live == 0 && s.Unmade() == 0 }

// move counts a made task going from state from to state to.
func (s *ArrayStatus) move(from, to JobState) {
	s.add(from, -1)
	s.add(to, 1)
}

func (s *ArrayStatus) add(st JobState, n int) {
	switch st {
	case "":
	case JobSucceeded:
		s.Succeeded += n
	case JobFailed:
		s.Failed += n
	case JobCancelled, JobSkipped:
		s.Cancelled += n
	case JobQueued:
		s.Queued += n
		s.Live += n
	default:
		s.Live += n
	}
}

// ArrayTask links a task to its array.
type ArrayTask struct {
	Array string `json:"array"`
	Index int    `json:"index"`
}

// TaskID is the job ID of an array's task at index i.
func TaskID(array string, i int) string { return array + "." + strconv.Itoa(i) }

// TaskPrefix is what the IDs of an array's tasks start with.
func TaskPrefix(array string) string { return array + "." }

// checkArray validates a new job's Array.
func checkArray(spec *JobSpec) error {
	a := spec.Array
	if a == nil {
		return nil
	}
	if err := a.Check(); err != nil {
		return fmt.Errorf("array: %v", err)
	}
	if spec.Gang != nil {
		return fmt.Errorf("array: a gang cannot be an array")
	}
	return nil
}

// startArray is saveJob's step for an array that would be queued: it runs
// instead and makes its first tasks.
func (a *applier) startArray(j *Job) error {
	from := j.State
	if j.Array == nil {
		j.Array = &ArrayStatus{Size: j.Spec.Array.Size()}
	}
	if s := j.Array; s.Next > 0 || s.Stopped {
		s.restart() // run again (a workflow's retry)
	}
	if err := a.fillArray(j); err != nil {
		return err
	}
	j.Reason = ""
	arrayState(j, from)
	if j.State.Terminal() {
		j.FinishedAt = a.at // nothing left to run: saveJob sees a rerun job, not a finish
	}
	return nil
}

// fillArray makes j's next tasks while it may (see the top of the file)
// and counts them; the caller saves j.
func (a *applier) fillArray(j *Job) error {
	s, spec := j.Array, j.Spec.Array
	for s.Unmade() > 0 && s.Queued < ArrayQueueAhead && (spec.Parallel == 0 || s.Live < spec.Parallel) {
		pos := s.Next
		s.Next++
		if s.excluded(pos) {
			continue
		}
		if pos < s.Redo {
			if err := a.redoTask(j, spec.Index(pos)); err != nil {
				return err
			}
			continue
		}
		if made, err := a.makeTask(j, spec.Index(pos)); err != nil {
			return err
		} else if made {
			s.add(JobQueued, 1)
		}
	}
	if s.Next >= s.Redo {
		s.Redo = 0
	}
	return nil
}

// makeTask writes the queued task of array j at index i, unless it
// exists (made is false then: the counts never said otherwise, but a
// stored task is never overwritten).
func (a *applier) makeTask(j *Job, i int) (made bool, err error) {
	tmpl, err := a.taskTemplate(j)
	if err != nil {
		return false, err
	}
	spec := *tmpl
	spec.Env = make(map[string]string, len(tmpl.Env)+3)
	maps.Copy(spec.Env, tmpl.Env)
	spec.Env[EnvArrayID] = j.ID
	spec.Env[EnvArrayIndex] = strconv.Itoa(i)
	spec.Env[EnvArraySize] = strconv.Itoa(j.Array.Size)
	t := &Job{
		ID: TaskID(j.ID, i), Spec: spec, State: JobQueued,
		SubmittedAt: j.SubmittedAt, SubmittedBy: j.SubmittedBy, CreateIndex: a.index,
		ArrayTask: &ArrayTask{Array: j.ID, Index: i},
	}
	if a.jobs.Get([]byte(t.ID)) != nil {
		return false, nil
	}
	return true, a.saveJob(t, "")
}

// taskTemplate is the spec every task of j copies: the array's, less what
// belongs to the array alone (its indexes, parents, run_at, singleton and
// webhooks: the array's own transitions call those).
func (a *applier) taskTemplate(j *Job) (*JobSpec, error) {
	if t := a.arrayTmpl[j.ID]; t != nil {
		return t, nil
	}
	spec := j.Spec
	if raw := a.specOf[j]; raw != nil {
		spec = JobSpec{}
		if err := decode(raw, &spec); err != nil {
			return nil, err
		}
	}
	spec.Array, spec.DependsOn, spec.After, spec.Condition = nil, nil, nil, ""
	spec.RunAt, spec.Singleton, spec.Notify = nil, false, nil
	if a.arrayTmpl == nil {
		a.arrayTmpl = map[string]*JobSpec{}
	}
	a.arrayTmpl[j.ID] = &spec
	return &spec, nil
}

// taskMoved is saveJob's step for a task that changed state: its array
// counts it, makes more tasks if it may and ends when it is done.
func (a *applier) taskMoved(t *Job, from JobState) error {
	j, err := a.getJob(t.ArrayTask.Array)
	if err != nil || j.Array == nil {
		return nil // the array was collected; the task stands alone
	}
	j.Array.move(from, t.State)
	return a.settleArray(j)
}

// settleArray makes what j may make and sets its state from its counts.
func (a *applier) settleArray(j *Job) error {
	from := j.State
	if from == JobWaiting {
		return a.saveJob(j, from) // not started: nothing made yet
	}
	if err := a.fillArray(j); err != nil {
		return err
	}
	arrayState(j, from)
	return a.saveJob(j, from)
}

// arrayState sets array j's state from its counts; from is its state
// before.
func arrayState(j *Job, from JobState) {
	s := j.Array
	switch {
	case !s.Done():
		j.State = JobRunning
		if from.Terminal() {
			j.Reason, j.FinishedAt = "", zeroTime
		}
	case s.Failed > 0:
		j.State, j.Reason = JobFailed, fmt.Sprintf("%d of %d tasks failed", s.Failed, s.Size)
	case s.Succeeded == s.Size:
		j.State, j.Reason = JobSucceeded, ""
	default:
		j.State = JobCancelled
		if j.Reason == "" {
			j.Reason = fmt.Sprintf("%d of %d tasks cancelled", s.Cancelled, s.Size)
		}
	}
}

// cancelArray cancels array j: nothing more is made and every live task
// is cancelled (a running one is asked to stop, and the array ends when
// it has).
func (a *applier) cancelArray(j *Job, reason string) error {
	s := j.Array
	if s == nil {
		s = &ArrayStatus{Size: j.Spec.Array.Size()}
		j.Array = s
	}
	s.stop()
	j.Reason = reason
	if j.State == JobWaiting {
		from := j.State
		j.State, j.NextRunAt = JobCancelled, zeroTime
		return a.saveJob(j, from)
	}
	if err := a.saveJob(j, j.State); err != nil {
		return err
	}
	ids, err := a.taskIDs(j.ID, func(st JobState) bool { return !st.Terminal() })
	if err != nil {
		return err
	}
	if err := a.cancelTasks(ids, reason); err != nil {
		return err
	}
	if j, err = a.getJob(j.ID); err != nil {
		return err
	}
	return a.settleArray(j)
}

func (a *applier) cancelTasks(ids []string, reason string) error {
	for _, id := range ids {
		t, err := a.getJob(id)
		if err != nil {
			return err
		}
		if !t.State.Terminal() {
			if err := a.cancel(t, reason); err != nil {
				return err
			}
		}
	}
	return nil
}

// taskIDs lists the made tasks of array id whose state keep accepts, by
// ID (not by index).
func (a *applier) taskIDs(id string, keep func(JobState) bool) ([]string, error) {
	prefix := []byte(TaskPrefix(id))
	var ids []string
	c := a.jobs.Cursor()
	for k, v := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
		var st struct {
			State JobState `json:"state"`
		}
		if err := decode(v, &st); err != nil {
			return nil, err
		}
		if keep(st.State) {
			ids = append(ids, string(k))
		}
	}
	return ids, nil
}

// cancelIndexes cancels some indexes of an array (`job cancel ARRAY
// --indexes`): the made ones that are live, and the ones not made yet,
// which never will be.
func (a *applier) cancelIndexes(j *Job, indexes []int, reason string) error {
	if j.State.Terminal() {
		return fmt.Errorf("%w: array %s is already %s", ErrConflict, j.ID, j.State)
	}
	if j.Array == nil {
		j.Array = &ArrayStatus{Size: j.Spec.Array.Size()}
	}
	s, spec := j.Array, j.Spec.Array
	var made []string
	for _, i := range indexes {
		pos := spec.Position(i)
		switch {
		case pos < 0:
			return fmt.Errorf("%w: indexes: %d is not an index of %s (%s)", ErrBadCommand, i, j.ID, spec)
		case s.excluded(pos) || s.Stopped && pos >= s.Next:
			// cancelled already
		case a.jobs.Get([]byte(TaskID(j.ID, i))) != nil:
			made = append(made, TaskID(j.ID, i))
		case pos >= max(s.Next, s.Redo):
			// not made yet: never will be
			k, _ := slices.BinarySearch(s.Excluded, pos)
			s.Excluded = slices.Insert(s.Excluded, k, pos)
			s.Cancelled++
		}
	}
	if err := a.saveJob(j, j.State); err != nil {
		return err
	}
	if err := a.cancelTasks(made, reason); err != nil {
		return err
	}
	j, err := a.getJob(j.ID)
	if err != nil {
		return err
	}
	return a.settleArray(j)
}

// retryArray runs array j again: with indexes, those tasks at once (a
// failed or cancelled one reruns, one never made or passed over is made);
// without, every task that did not succeed, made again in index order
// within the array's bounds as if it were new (Redo).
func (a *applier) retryArray(j *Job, indexes []int) error {
	s, spec := j.Array, j.Spec.Array
	if s == nil {
		return fmt.Errorf("%w: array %s has not started", ErrConflict, j.ID)
	}
	var rerun []string
	var missing []int
	for _, i := range indexes {
		pos := spec.Position(i)
		switch {
		case pos < 0:
			return fmt.Errorf("%w: indexes: %d is not an index of %s (%s)", ErrBadCommand, i, j.ID, spec)
		case s.Stopped && pos >= s.Next && !s.excluded(pos):
			return fmt.Errorf("%w: indexes: %d was never made (the array was cancelled first): retry the whole array", ErrConflict, i)
		case s.excluded(pos):
			k, _ := slices.BinarySearch(s.Excluded, pos)
			s.Excluded = slices.Delete(s.Excluded, k, k+1)
			s.Cancelled--
			if pos < max(s.Next, s.Redo) && a.jobs.Get([]byte(TaskID(j.ID, i))) == nil {
				missing = append(missing, i) // passed over: make it now
			}
		case a.jobs.Get([]byte(TaskID(j.ID, i))) != nil:
			rerun = append(rerun, TaskID(j.ID, i))
		case pos < max(s.Next, s.Redo):
			return fmt.Errorf("%w: indexes: task %s is gone (collected)", ErrConflict, TaskID(j.ID, i))
		}
	}
	if len(indexes) == 0 {
		s.restart()
	}
	from := j.State
	if from.Terminal() {
		j.State, j.Reason, j.FinishedAt = JobRunning, "", zeroTime
	}
	for _, i := range missing {
		if made, err := a.makeTask(j, i); err != nil {
			return err
		} else if made {
			s.add(JobQueued, 1)
		}
	}
	if err := a.saveJob(j, from); err != nil {
		return err
	}
	for _, id := range rerun {
		t, err := a.getJob(id)
		if err != nil {
			return err
		}
		if t.State == JobFailed || t.State == JobCancelled || t.State == JobSkipped {
			if err := a.rerun(t); err != nil {
				return err
			}
		}
	}
	j, err := a.getJob(j.ID)
	if err != nil {
		return err
	}
	return a.settleArray(j)
}

// redoTask is fillArray's step at a position below Redo: a task that
// failed or was cancelled reruns; a live or succeeded one is left, and so
// is one collected by GC (counted as it ended). It counts what it does in
// j.Array.
func (a *applier) redoTask(j *Job, i int) error {
	s := j.Array
	if a.jobs.Get([]byte(TaskID(j.ID, i))) == nil {
		return nil
	}
	t, err := a.getJob(TaskID(j.ID, i))
	if err != nil {
		return err
	}
	switch t.State {
	case JobFailed, JobCancelled, JobSkipped:
	default:
		return nil
	}
	from := t.State
	a.quietTasks = true // counted here: the array is being changed by the caller
	err = a.rerun(t)
	a.quietTasks = false
	if err != nil {
		return err
	}
	s.move(from, t.State)
	return nil
}

// ParseIndexes reads a list of indexes such as "3,7-9", ascending and
// without repeats, of at most MaxArraySize.
func ParseIndexes(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		switch {
		case err1 != nil || err2 != nil || a < 0:
			return nil, fmt.Errorf("%q: want indexes such as 3,7-9", part)
		case b < a:
			return nil, fmt.Errorf("%q: the end is before the start", part)
		case len(out)+b-a+1 > MaxArraySize:
			return nil, fmt.Errorf("more than %d indexes", MaxArraySize)
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// FormatIndexes writes ascending indexes as ranges: "3,7-9".
func FormatIndexes(idx []int) string {
	var b strings.Builder
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(idx[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(idx[j]))
		}
		i = j + 1
	}
	return b.String()
}

// ArrayIndexes lists the indexes of array id's made tasks in state st,
// ascending, from the state index (no task is decoded).
func (t *Tx) ArrayIndexes(id string, st JobState) []int {
	prefix := append(jobStatePrefix(st), TaskPrefix(id)...)
	var out []int
	c := t.tx.Bucket(bucketJobsByState).Cursor()
	for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
		if i, err := strconv.Atoi(string(k[len(prefix):])); err == nil {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}
