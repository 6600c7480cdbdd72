module ringcast

go 1.19
