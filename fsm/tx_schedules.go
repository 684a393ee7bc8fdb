package fsm

// Schedule returns one schedule, or ErrNotFound.
func (t *Tx) Schedule(name string) (*Schedule, error) {
	v := t.tx.Bucket(bucketSchedules).Get([]byte(name))
	return record[Schedule](v, "schedule", name)
}

// ForEachSchedule calls fn for every schedule in name order until fn
// returns false.
func (t *Tx) ForEachSchedule(fn func(*Schedule) bool) error {
	c := t.tx.Bucket(bucketSchedules).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		var s Schedule
		if err := decode(v, &s); err != nil {
			return err
		}
		if !fn(&s) {
			return nil
		}
	}
	return nil
}
