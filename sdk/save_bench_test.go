package sdk_test

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkSaveCheckpoint: durable SaveCheckpoint (which finds the new
// checkpoint's parent first) by 1 and 64 concurrent savers over 1,000
// threads, beside Emit of the same checkpoints: what lineage costs a save.
func BenchmarkSaveCheckpoint(b *testing.B) {
	for _, workers := range []int{1, 64} {
		b.Run(fmt.Sprintf("save/savers=%d", workers), func(b *testing.B) {
			c := benchClient(b)
			ctx := context.Background()
			runWorkers(b, workers, func(i int) error {
				_, err := c.SaveCheckpoint(ctx, fmt.Sprintf("th_%d", i%1000), "", checkpoint(i))
				return err
			})
		})
		b.Run(fmt.Sprintf("emit/savers=%d", workers), func(b *testing.B) {
			c := benchClient(b)
			ctx := context.Background()
			runWorkers(b, workers, func(i int) error {
				_, err := c.Emit(ctx, checkpointEvent(i, 1000))
				return err
			})
		})
	}
}
