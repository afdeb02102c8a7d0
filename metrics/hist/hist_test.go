package hist

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBucketsAreMonotonicAndCover(t *testing.T) {
	prev := -1
	for _, v := range []uint64{0, 1, 31, 32, 33, 63, 64, 1000, 1 << 20, 1<<40 + 12345, 1<<63 - 1} {
		i := index(v)
		assert.GreaterOrEqual(t, i, prev)
		assert.LessOrEqual(t, lower(i), v, "value %d in bucket %d", v, i)
		if i+1 < buckets {
			assert.Greater(t, lower(i+1), v, "value %d below next bucket", v)
		}
		prev = i
	}
}

func TestQuantilesWithinError(t *testing.T) {
	var h Histogram
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]time.Duration, 100000)
	for i := range vals {
		vals[i] = time.Duration(r.ExpFloat64() * float64(time.Millisecond))
		h.Record(vals[i])
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := vals[int(q*float64(len(vals)))]
		got := h.Quantile(q)
		assert.InEpsilon(t, float64(want), float64(got), 1.0/16, "q=%v", q)
	}
	assert.Equal(t, uint64(len(vals)), h.Count())
	assert.Equal(t, vals[len(vals)-1], h.Max())
}

func TestEmptyAndMerge(t *testing.T) {
	var a, b Histogram
	assert.Zero(t, a.Quantile(0.5))
	a.Record(10 * time.Microsecond)
	b.Record(time.Second)
	b.Record(-5)
	a.Merge(&b)
	assert.Equal(t, uint64(3), a.Count())
	assert.Equal(t, time.Second, a.Max())
	assert.Zero(t, a.Min(), "negative durations count as 0")
	assert.Zero(t, a.Quantile(0))

	var c Histogram
	c.Record(time.Millisecond)
	c.Merge(&Histogram{})
	assert.Equal(t, time.Millisecond, c.Min(), "merging an empty histogram keeps the minimum")
}

func TestEachIsACDF(t *testing.T) {
	var h Histogram
	for _, d := range []time.Duration{5, 5, 100, 1000, 1000, 1000, -3} {
		h.Record(d)
	}
	assert.Equal(t, time.Duration(0), h.Min())
	var last time.Duration = -1
	var lastF float64
	var points int
	h.Each(func(d time.Duration, f float64) {
		assert.Greater(t, d, last, "bucket bounds increase")
		assert.Greater(t, f, lastF, "fractions increase")
		last, lastF = d, f
		points++
	})
	assert.Equal(t, 4, points, "one point per non-empty bucket: 0, 5, ~100, ~1000")
	assert.Equal(t, 1.0, lastF)
	assert.Equal(t, time.Duration(1000), last, "the last point is kept at Max")
	var empty Histogram
	empty.Each(func(time.Duration, float64) { t.Error("an empty histogram has no CDF points") })
}

func TestRecordAllocatesNothing(t *testing.T) {
	var h Histogram
	assert.Zero(t, testing.AllocsPerRun(1000, func() { h.Record(123 * time.Microsecond) }))
}
