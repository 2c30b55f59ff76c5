// Package pglisten holds one LISTEN connection to PostgreSQL for as long as
// a process runs, reconnecting when the database goes away. What listens
// must assume it missed notifications while it was not connected: Run tells
// it when a connection is (again) listening, and when it is lost.
package pglisten

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Handler receives what happens on the connection, all from Run's
// goroutine.
type Handler struct {
	// Listening is called once LISTEN has taken effect on a new
	// connection: anything may have happened while there was none.
	Listening func()
	// Lost is called when the connection is gone, before reconnecting.
	Lost func()
	// Notify is called with each notification's payload.
	Notify func(payload string)
}

// Run listens on channel (a constant identifier: it is not quoted) with a
// connection taken from pool, until ctx ends, reconnecting with a bounded
// backoff. what names the listener in its logs.
func Run(ctx context.Context, pool *pgxpool.Pool, channel, what string, log *slog.Logger, h Handler) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := listen(ctx, pool, channel, h)
		if h.Lost != nil {
			h.Lost()
		}
		if ctx.Err() != nil {
			return
		}
		log.Warn(what+" lost its connection; reconnecting", slog.String("error", err.Error()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func listen(ctx context.Context, pool *pgxpool.Pool, channel string, h Handler) error {
	pooled, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A LISTEN connection must not go back to the pool still listening.
	conn := pooled.Hijack()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	if h.Listening != nil {
		h.Listening()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if h.Notify != nil {
			h.Notify(n.Payload)
		}
	}
}
