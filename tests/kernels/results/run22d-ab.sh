# A/B at 1080p, each config three times in turn; then a table.
bash tests/kernels/ab1080.sh .gpu/b "$OUT/r" 3 'all=' 'nopdl=ZCP_PDL=0'
