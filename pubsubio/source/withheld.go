package source

import "time"

// Withholding: what the intake does with a delivery that finds the budget
// full and gets no room (intake.go, overBudgetLocked). The delivery keeps
// its lease with the running subscriber, whose flow control counts it,
// but not its payload; every later delivery of the split is withheld
// behind it, so none overtakes it. Each drain gives back the oldest
// withheld deliveries that fit the room it made, and expects them back:
// their redeliveries pass the withholding, into room reserved for them in
// the budget, so that no later delivery takes it and the same message is
// not withheld, and given back, again. Under OrderingPerKey a key with
// a message given back and not yet received again holds its later
// deliveries back too, so that they cannot overtake the redelivery.

// returnWait is how long a withheld message given back is expected back;
// past it, its ordering key no longer holds later deliveries back.
const returnWait = time.Minute

// returnedMsg is a withheld message given back, by message ID, and the
// room it has in the budget.
type returnedMsg struct {
	orderingKey string
	at          time.Time
	size        int64
}

// withhold keeps d until returnWithheld or giveBackAll gives it back.
func (l *ledger) withhold(d *delivery) {
	d.state = withheld
	d.arrived = l.now()
	l.withheld = append(l.withheld, d)
	l.lease(d)
}

// mustWithhold reports whether d, a delivery that was not given back to
// come back, has to wait behind what is withheld or returned.
func (l *ledger) mustWithhold(d *delivery, perKey bool) bool {
	return len(l.withheld) > 0 || perKey && d.msg.OrderingKey != "" && l.returnedKeys[d.msg.OrderingKey] > 0
}

// comingBack reports whether message id is a withheld message given back,
// and stops expecting it: the delivery takes the room reserved for it.
func (l *ledger) comingBack(id string) bool {
	r, ok := l.returned[id]
	if ok {
		l.forgetReturned(id, r)
	}
	return ok
}

// forgetAllReturned stops expecting every returned message and frees its
// room.
func (l *ledger) forgetAllReturned() {
	for id, r := range l.returned {
		l.forgetReturned(id, r)
		l.budget.free(1, r.size)
	}
}

// forgetReturned stops expecting r, message id; the caller owns its room.
func (l *ledger) forgetReturned(id string, r returnedMsg) {
	delete(l.returned, id)
	if r.orderingKey != "" {
		if l.returnedKeys[r.orderingKey]--; l.returnedKeys[r.orderingKey] <= 0 {
			delete(l.returnedKeys, r.orderingKey)
		}
	}
}

// returnWithheld gives back, through the running subscriber, the oldest
// withheld deliveries that fit the budget's room (one larger than the
// byte budget when nothing is buffered, as reserve admits it), so that a
// small room does not cost every withheld message a delivery attempt, and
// reserves that room for their redeliveries.
func (l *ledger) returnWithheld(now time.Time) {
	for id, r := range l.returned {
		if now.Sub(r.at) > returnWait {
			l.forgetReturned(id, r)
			l.budget.free(1, r.size)
		}
	}
	messages, bytes, empty := l.budget.spare()
	n := 0
	for ; n < len(l.withheld) && messages > 0; n++ {
		d := l.withheld[n]
		if d.size > bytes && !(empty && n == 0) || !l.budget.reserve(d.size) {
			break
		}
		messages--
		bytes -= d.size
		l.returned[d.msg.ID] = returnedMsg{orderingKey: d.msg.OrderingKey, at: now, size: d.size}
		if d.msg.OrderingKey != "" {
			l.returnedKeys[d.msg.OrderingKey]++
		}
		l.end(d, nackIt, nackedBudget)
	}
	l.withheld = l.withheld[n:]
}
