package budget

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// ReleaseTx returns the whole held reservation of each task to every
// balance row it held: the task failed or was canceled before spending
// anything we know of. It returns ErrNotFound when a task holds no
// reservation, after releasing the others; tx stays usable.
func ReleaseTx(ctx context.Context, tx pgx.Tx, taskIDs ...string) error {
	var missing error
	for _, id := range taskIDs {
		err := release(ctx, tx, id)
		switch {
		case errors.Is(err, ErrNotFound):
			missing = err
		case err != nil:
			return err
		}
	}
	return missing
}

// release returns one task's reservation: two statements, the second
// locking the balance rows only once the first found the reservation.
func release(ctx context.Context, tx pgx.Tx, taskID string) error {
	var amount int64
	var ids []int64
	err := tx.QueryRow(ctx, closeHeldSQL("released"), taskID).Scan(new(string), &amount, &ids)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("budget: close reservation: %w", err)
	}
	slices.Sort(ids)
	_, err = tx.Exec(ctx, `
		WITH locked AS (`+lockRowsSQL(`id = ANY($3)`)+`
		), p AS (
			UPDATE budget_periods b SET `+setFromLocked+`, reserved_micros = k.reserved_micros - $2, spent_micros = k.spent_micros
			FROM locked k WHERE b.id = k.id RETURNING b.id, b.owner_id, b.workload
		)
		`+ledgerTaskRow+`
		SELECT owner_id, workload, id, $1, 'release', $2 FROM p`, taskID, amount, ids)
	if err != nil {
		return fmt.Errorf("budget: release: %w", err)
	}
	return nil
}

// stillHeld is how a statement that closes reservations by task id says
// "held": closed_at IS NULL, which the table's CHECK
// (budget_reservations_closed) makes the same as state = 'held'. Written
// as state = 'held', the condition matches the predicate of the partial
// indexes on held reservations, and a plan made while statistics said
// nothing was held (ANALYZE in a quiet moment, then a burst) walks one of
// them, every held reservation, instead of the primary key: at 3,000 held,
// 209 buffers and 2,999 rows filtered out for one settlement. Nothing
// else implies those predicates, so only the primary key can find the row.
const stillHeld = `closed_at IS NULL`

// closeHeldSQL closes task $1's held reservation as state, returning its
// owner, amount and balance rows; no row when none is held.
func closeHeldSQL(state string) string {
	return `
		UPDATE budget_reservations SET state = '` + state + `', closed_at = now()
		WHERE task_id = $1 AND ` + stillHeld + `
		RETURNING owner_id, amount_micros, budget_period_ids`
}
