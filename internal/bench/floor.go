package bench

import (
	"container/heap"
	"slices"
	"time"

	"github.com/zonalblob/zonalblob/blob/latency"
)

// The floor of a commit-log row is what its appends would take if the log
// cost nothing of its own: a seeded discrete-event model of the emulator's
// streams, run with the row's appenders, record size, quorum, stripes and
// frames in flight. It models a stream as the emulator runs one (see
// gcsrapidtest's replyQueue): a stream's bytes arrive one after another at
// the profile's WritePerMiB, each flush's round trip (Flush) starts once its
// bytes have arrived and overlaps the others', and replies go out in order.
// A frame takes every record waiting when a zone has room for it (fewer
// than inFlight frames in flight); each zone is sent every frame it has not
// been given as one append once it has room; a record is acknowledged once
// every record up to it is on quorum zones of its stripe. Each round trip
// also pays overhead, the client's own cost measured in the same run: the
// raw round trip's p50 less the model's.
//
// The measured row over its floor is what the log, the client library and
// the machine add; the floor over the raw round trip is what the model
// itself imposes on that many appenders (in-order replies, a quorum's
// second-fastest zone, a stream's bandwidth).
type floorModel struct {
	flush, perMiB latency.Dist
	// slow is added to every flush of the last zone (the rows with one
	// zone slowed by SlowZone).
	slow     latency.Dist
	overhead time.Duration

	appenders, size, zones, quorum, inFlight, stripes int
	appends                                           int // measured appends, after a warm-up of two per appender
	seed                                              uint64
}

// rawModel returns the model's p50 of one append of size bytes on an idle
// stream: its transfer and its flush.
func rawModel(flush, perMiB latency.Dist, size int, seed uint64) time.Duration {
	s := latency.NewSampler(seed)
	lat := make([]time.Duration, 4000)
	for i := range lat {
		lat[i] = transfer(s, perMiB, size) + s.Sample(flush)
	}
	slices.Sort(lat)
	return Quantile(lat, 0.5)
}

func transfer(s *latency.Sampler, perMiB latency.Dist, n int) time.Duration {
	return time.Duration(float64(s.Sample(perMiB)) * float64(n) / (1 << 20))
}

type floorEvent struct {
	at     time.Duration
	arrive bool // an appender's next append; otherwise a zone's reply
	stripe int
	zone   int
	upto   int // frames of the stripe the reply acknowledges
}

type floorEvents []floorEvent

func (h floorEvents) Len() int           { return len(h) }
func (h floorEvents) Less(i, j int) bool { return h[i].at < h[j].at }
func (h floorEvents) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *floorEvents) Push(x any)        { *h = append(*h, x.(floorEvent)) }
func (h *floorEvents) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type floorFrame struct {
	recs  []int // global offsets
	bytes int
	acks  int
}

type floorZone struct {
	sent, acked, inFlight int // frames sent, frames acknowledged
	arrived, lastReply    time.Duration
}

type floorStripe struct {
	pending []int
	frames  []floorFrame
	zones   []floorZone
}

// floor returns the model's p50 and p99 of an append.
func (m floorModel) floor() (p50, p99 time.Duration) {
	s := latency.NewSampler(m.seed)
	stripes := make([]floorStripe, max(m.stripes, 1))
	for i := range stripes {
		stripes[i].zones = make([]floorZone, m.zones)
	}
	var (
		events    floorEvents
		start     []time.Duration // per offset: when its append began
		owner     []int           // per offset: its appender
		committed []bool
		acked     int // every offset below is acknowledged
		lat       []time.Duration
	)
	warmup := 2 * m.appenders
	send := func(st *floorStripe, si, zi int, now time.Duration) {
		z := &st.zones[zi]
		if z.sent == len(st.frames) || z.inFlight >= m.inFlight {
			return
		}
		n := 0
		for _, f := range st.frames[z.sent:] {
			n += f.bytes
		}
		z.arrived = max(z.arrived, now+m.overhead/2) + transfer(s, m.perMiB, n)
		due := z.arrived + s.Sample(m.flush)
		if zi == m.zones-1 {
			due += s.Sample(m.slow)
		}
		z.lastReply = max(z.lastReply, due)
		z.sent, z.inFlight = len(st.frames), z.inFlight+1
		heap.Push(&events, floorEvent{at: z.lastReply + m.overhead/2, stripe: si, zone: zi, upto: z.sent})
	}
	cut := func(st *floorStripe, si int, now time.Duration) {
		if len(st.pending) == 0 || !slices.ContainsFunc(st.zones, func(z floorZone) bool { return z.inFlight < m.inFlight }) {
			return
		}
		st.frames = append(st.frames, floorFrame{recs: st.pending, bytes: len(st.pending) * m.size})
		st.pending = nil
		for zi := range st.zones {
			send(st, si, zi, now)
		}
	}
	for a := range m.appenders {
		heap.Push(&events, floorEvent{at: time.Duration(a), arrive: true, zone: a})
	}
	for len(lat) < m.appends && len(events) > 0 {
		e := heap.Pop(&events).(floorEvent)
		if e.arrive {
			off := len(start)
			start, owner, committed = append(start, e.at), append(owner, e.zone), append(committed, false)
			si := off % len(stripes)
			stripes[si].pending = append(stripes[si].pending, off)
			cut(&stripes[si], si, e.at)
			continue
		}
		st := &stripes[e.stripe]
		z := &st.zones[e.zone]
		z.inFlight--
		for ; z.acked < e.upto; z.acked++ {
			f := &st.frames[z.acked]
			if f.acks++; f.acks == m.quorum {
				for _, off := range f.recs {
					committed[off] = true
				}
			}
		}
		for acked < len(committed) && committed[acked] {
			if acked >= warmup {
				lat = append(lat, e.at-start[acked])
			}
			heap.Push(&events, floorEvent{at: e.at, arrive: true, zone: owner[acked]})
			acked++
		}
		send(st, e.stripe, e.zone, e.at)
		cut(st, e.stripe, e.at)
	}
	slices.Sort(lat)
	return Quantile(lat, 0.5), Quantile(lat, 0.99)
}
