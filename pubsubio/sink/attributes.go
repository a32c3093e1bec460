package sink

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/tracing"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// stamped returns m with the attributes Config.TimestampAttribute and
// Config.IDAttribute set for an element at eventTime. m's own map is never
// written: the pipeline may share it.
func (cfg Config) stamped(m model.Message, eventTime time.Time) model.Message {
	if cfg.TimestampAttribute == "" && cfg.IDAttribute == "" {
		return m
	}
	attrs := make(map[string]string, len(m.Attributes)+2)
	maps.Copy(attrs, m.Attributes)
	if _, ok := attrs[cfg.IDAttribute]; cfg.IDAttribute != "" && !ok {
		attrs[cfg.IDAttribute] = elementID(m, eventTime)
	}
	if cfg.TimestampAttribute != "" {
		attrs[cfg.TimestampAttribute] = strconv.FormatInt(eventTime.UnixMilli(), 10)
	}
	m.Attributes = attrs
	return m
}

// elementID is the ID of the element m at eventTime: the first 16 bytes,
// in hex, of a SHA-256 over every field that makes it what it is, each
// length-prefixed so that no two elements encode alike. Its Topic is left
// out: the ID names the element, wherever it is sent; and so is the trace
// context it carries, which a traced read gives each delivery anew.
func elementID(m model.Message, eventTime time.Time) string {
	h := sha256.New()
	field := func(s string) {
		writeInt(h, int64(len(s)))
		io.WriteString(h, s)
	}
	field(m.Subscription.String())
	field(m.ID)
	writeInt(h, int64(len(m.Data)))
	h.Write(m.Data)
	field(m.OrderingKey)
	writeInt(h, eventTime.UnixMilli())
	keys := slices.DeleteFunc(slices.Sorted(maps.Keys(m.Attributes)), func(k string) bool {
		return k == tracing.TraceParentAttribute || k == tracing.TraceStateAttribute
	})
	writeInt(h, int64(len(keys)))
	for _, k := range keys {
		field(k)
		field(m.Attributes[k])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func writeInt(h hash.Hash, n int64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	h.Write(b[:])
}
