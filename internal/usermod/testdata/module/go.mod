module example.com/usermodule

go 1.26.0

require github.com/rightsize/rightsize-go v0.0.0

// usermod rewrites this to the repository's absolute path in its copy.
replace github.com/rightsize/rightsize-go => ../../../..
