package wlm

// This file holds the block-time histograms of admission, by pool.

import (
	"maps"
	"sync"
	"time"
)

// BlockTimeBuckets are the upper bounds, in seconds, of the block-time
// histogram's buckets; a last bucket (+Inf) takes the rest.
var BlockTimeBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60}

// BlockHistogram is the block time of the statements of one pool that
// were held: Counts[i] counts those at most BlockTimeBuckets[i] seconds
// (not cumulative; Counts has one more entry, for +Inf), Sum their
// total in seconds.
type BlockHistogram struct {
	Counts []uint64
	Count  uint64
	Sum    float64
}

// blockStats keeps a BlockHistogram per pool. It is safe for concurrent
// use; its lock is a leaf.
type blockStats struct {
	mu    sync.Mutex
	pools map[string]*BlockHistogram // guarded by mu
}

func newBlockStats() *blockStats { return &blockStats{pools: map[string]*BlockHistogram{}} }

func (b *blockStats) observe(pool string, d time.Duration) {
	sec := d.Seconds()
	i := 0
	for i < len(BlockTimeBuckets) && sec > BlockTimeBuckets[i] {
		i++
	}
	b.mu.Lock()
	h := b.pools[pool]
	if h == nil {
		h = &BlockHistogram{Counts: make([]uint64, len(BlockTimeBuckets)+1)}
		b.pools[pool] = h
	}
	h.Counts[i]++
	h.Count++
	h.Sum += sec
	b.mu.Unlock()
}

// snapshot copies the histograms of the pools keep reports true for,
// and forgets the others (dropped pools), so the map stays bounded by
// the catalog.
func (b *blockStats) snapshot(keep func(pool string) bool) map[string]BlockHistogram {
	b.mu.Lock()
	defer b.mu.Unlock()
	maps.DeleteFunc(b.pools, func(k string, _ *BlockHistogram) bool { return !keep(k) })
	out := make(map[string]BlockHistogram, len(b.pools))
	for k, h := range b.pools {
		out[k] = BlockHistogram{Counts: append([]uint64(nil), h.Counts...), Count: h.Count, Sum: h.Sum}
	}
	return out
}

// BlockTimes returns the block-time histogram of every pool of the
// current catalog whose statements were held ("" for statements of no
// pool held by a link's max_active_statements).
func (m *Admission) BlockTimes() map[string]BlockHistogram {
	cat := m.state.Load().cat
	return m.blocks.snapshot(func(pool string) bool { return pool == "" || cat.Pools[pool] != nil })
}
