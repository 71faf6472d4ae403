module github.com/dlock/dlock/bench/coordgo

go 1.19

require (
	github.com/jackc/pgx/v4 v4.15.0
	go.etcd.io/etcd v0.0.0-00010101000000-000000000000
)
