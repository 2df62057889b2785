// The real node's pod sandbox image: one static binary, built by tests/realnode/harness/.
module placementextender/pause

go 1.26.0
