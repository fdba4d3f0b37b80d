package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/record"
)

// BenchmarkRacingWrites measures what the ledger's retries cost when writers race on one
// operation: each round, that many writers update the operation's fields at the same moment,
// through an endpoint that refuses racing writes as DynamoDB does, each transaction holding its
// items 5 ms (a transaction's time on DynamoDB; kumo answers in well under a millisecond). It
// prints, per number of writers, the latency of one write (p50, p99, the retries' waits
// included), how many attempts DynamoDB refused per write, and how many writes lost every
// attempt (ErrContention, a 409 for a buyer).
func BenchmarkRacingWrites(b *testing.B) {
	if dynamotest.Current() == dynamotest.Moto {
		b.Skip(motoNotIsolated)
	}
	type row struct {
		writers          int
		p50, p99         time.Duration
		refused, lostPct float64
	}
	var rows []row
	defer func() {
		fmt.Printf("\nRacing writes on one operation (TransactWriteItems held %v each)\n", 5*time.Millisecond)
		fmt.Printf("%-8s %10s %10s %18s %10s\n", "writers", "p50", "p99", "refused per write", "lost")
		for _, r := range rows {
			fmt.Printf("%-8d %10v %10v %18.2f %9.2f%%\n", r.writers, r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond), r.refused, r.lostPct)
		}
	}()
	for _, writers := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s, conflicts := racingStore(b, 5*time.Millisecond)
			ctx := context.Background()
			var (
				mu   sync.Mutex
				took []time.Duration
				lost int
			)
			b.ResetTimer()
			for b.Loop() {
				var wg sync.WaitGroup
				for range writers {
					wg.Go(func() {
						start := time.Now()
						_, err := s.UpdateFields(ctx, "acme", "op-1", record.AnyVersion, record.Patch{Actor: "bench"})
						d := time.Since(start)
						mu.Lock()
						defer mu.Unlock()
						switch {
						case errors.Is(err, record.ErrContention):
							lost++
						case err != nil:
							b.Error(err)
						}
						took = append(took, d)
					})
				}
				wg.Wait()
			}
			b.StopTimer()
			slices.Sort(took)
			n := len(took)
			r := row{writers: writers, p50: took[n/2], p99: took[min(n-1, n*99/100)],
				refused: float64(conflicts.Refused()) / float64(n), lostPct: 100 * float64(lost) / float64(n)}
			b.ReportMetric(float64(r.p99.Microseconds())/1000, "p99-ms/write")
			b.ReportMetric(r.refused, "refused/write")
			rows = append(rows, r)
		})
	}
}
