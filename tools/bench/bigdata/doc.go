// Package bigdata measures Tollgate's reads over a large history: scenarios
// (4) and (5) of the performance targets. It owns two things.
//
// The seed fills a migrated scratch database with the rows the service
// itself would have written for a long history, in set-based SQL
// (INSERT … SELECT over generate_series, no COPY): finished tasks with their
// attempt journal and replay records, and the money side of settled tasks
// (reservations, the append-only ledger, settled usage, monthly budget
// periods whose balances the ledger explains, so `tollgate budget verify`
// passes). Every attribute of a task is a pure function of its index, so
// the tasks table and the ledger describe the same tasks wherever they
// overlap, and a run can be repeated row for row.
//
// The measurement talks to a real `tollgate serve` over HTTP only, as
// support and finance staff would: replay lookups of random records with
// concurrent clients, record searches with the filters support uses, the
// usage report, and the CSV export while the server's memory is sampled from
// /proc, to show that the export streams.
//
// What the seed cannot reproduce: tasks.output_sealed stays NULL (AES-GCM
// sealing has no SQL equivalent, and no read measured here opens it), and
// tasks.payload holds filler bytes of a realistic length.
package bigdata
