package source

import (
	"fmt"
	"testing"

	"cloud.google.com/go/pubsub/v2"
	"github.com/google/go-cmp/cmp"
)

// Under PER_KEY the client hands a split each key's messages in publish
// order, keys interleaved. What the split emits, over bundles of any size,
// keeps each key's order, including after Pub/Sub redelivers a key (it
// redelivers the key's later messages too).
func TestPerKeyOrderSurvivesBundlesAndRedelivery(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, func(c *Config) { c.Ordering = OrderingPerKey }))
	run := h.poll()
	h.conn.nextReceive(t)

	keys := []string{"k0", "k1", "k2"}
	const perKey = 20
	deliverKeyed := func(key string, from, to int, round int) {
		for i := from; i < to; i++ {
			id := fmt.Sprintf("%s-%02d", key, i)
			m := &pubsub.Message{ID: id, OrderingKey: key, Data: []byte(id)}
			deliverTo(h.r, run, m, &fakeHandle{}, fmt.Sprintf("ack-%s-r%d", id, round))
		}
	}
	// Interleave the keys a few messages at a time, as dispatch would.
	for i := 0; i < perKey; i += 5 {
		for _, k := range keys {
			deliverKeyed(k, i, i+5, 0)
		}
	}

	emitted := map[string][]string{}
	collect := func(batch []*delivery) {
		for _, d := range batch {
			emitted[d.msg.OrderingKey] = append(emitted[d.msg.OrderingKey], d.msg.ID)
		}
	}
	for seq, size := range []int{1, 7, 3, 13, 1000} {
		collect(drain(h.r, size, int64(seq)))
	}
	for _, k := range keys {
		if got, want := emitted[k], keyIDs(k, 0, perKey); !cmp.Equal(got, want) {
			t.Errorf("key %s emitted out of order:\n%s", k, cmp.Diff(want, got))
		}
	}

	// Pub/Sub redelivers k1 from message 10 on; the new round is emitted in
	// order after what came before.
	emitted = map[string][]string{}
	deliverKeyed("k1", 10, perKey, 1)
	for seq, size := range []int{4, 1000} {
		collect(drain(h.r, size, int64(10+seq)))
	}
	if got, want := emitted["k1"], keyIDs("k1", 10, perKey); !cmp.Equal(got, want) {
		t.Errorf("redelivered k1 emitted out of order:\n%s", cmp.Diff(want, got))
	}
}

func keyIDs(key string, from, to int) []string {
	var ids []string
	for i := from; i < to; i++ {
		ids = append(ids, fmt.Sprintf("%s-%02d", key, i))
	}
	return ids
}
