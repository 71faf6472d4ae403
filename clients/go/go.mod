module dlock

go 1.19
