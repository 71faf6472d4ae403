module github.com/dlock/dlock/clients/go

go 1.19
