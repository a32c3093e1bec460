package flinkjob

// Stamp marks the moment a bundle began: the bundle's successor, or the
// bundle itself when the job finishes bundles before checkpoints
// (FinishesBundles). Judge says whether a completed checkpoint holds what
// that bundle emitted.
type Stamp struct {
	mark  *mark
	epoch int64 // the watcher's epoch when it was made
}

// mark is shared by the stamps made between two polls: the first
// successful poll begun after them resolves it with the JobManager's
// clock.
type mark struct {
	after int64 // polls begun before it was made
	at    int64 // the JobManager's clock (ms) read after it; 0 until then
}

// Verdict is what Judge says of a stamp.
type Verdict int

const (
	// Waiting: no completed checkpoint covers it yet.
	Waiting Verdict = iota
	// Covered: a completed checkpoint triggered after it holds it.
	Covered
	// Void: a restore or another job came since it was made, so what it
	// marks may have been rolled back; no checkpoint will ever cover it.
	Void
)

// Mark returns a stamp for now.
func (w *Watcher) Mark() Stamp {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.jobID == "" {
		w.marked = true
	}
	if n := len(w.unresolved); n == 0 || w.unresolved[n-1].after != w.polls {
		w.unresolved = append(w.unresolved, &mark{after: w.polls})
	}
	return Stamp{mark: w.unresolved[len(w.unresolved)-1], epoch: w.epoch}
}

// resolve gives the marks made before poll n began the JobManager's clock
// that poll read.
func (w *Watcher) resolve(n, now int64) {
	i := 0
	for ; i < len(w.unresolved) && w.unresolved[i].after < n; i++ {
		w.unresolved[i].at = now
	}
	w.unresolved = w.unresolved[:copy(w.unresolved, w.unresolved[i:])]
}

// Judge says whether a checkpoint covers s.
func (w *Watcher) Judge(s Stamp) Verdict {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case s.epoch != w.epoch:
		return Void
	case s.mark.at != 0 && w.covers > s.mark.at:
		return Covered
	}
	return Waiting
}
