// The real node's pod sandbox image: one static binary, built by extender/devcluster/realnode/.
module placementextender/pause

go 1.26.0
