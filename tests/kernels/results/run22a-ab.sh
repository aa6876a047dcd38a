# A/B of run 22's three changes at 1080p, each config twice in turn; then a table.
bash tests/kernels/ab1080.sh .gpu/b "$OUT" 2 \
        'base=ZCP_HEAD_REGS=0,ZCP_POOL_IN_CONV=0,ZCP_CONV0_EXACT=1' 'head=ZCP_POOL_IN_CONV=0,ZCP_CONV0_EXACT=1' \
        'pool=ZCP_HEAD_REGS=0,ZCP_CONV0_EXACT=1' 'conv0=ZCP_HEAD_REGS=0,ZCP_POOL_IN_CONV=0' 'all='
