module gpupoc.local/sim/pause

go 1.26.0
