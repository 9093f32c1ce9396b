set terminal pngcairo size 860,560 noenhanced
set output '/work/wt/lenet/bench/results/2026-11-23-vm-lenet/loss-mlp-b32-r1.png'
set title "MNIST mlp-b32-r1: training loss (rank 0 batch)\nagainst training time"
set xlabel 'seconds of training'
set ylabel 'loss'
set logscale x
set key below horizontal height 1
set grid
plot '/work/wt/lenet/bench/results/2026-11-23-vm-lenet/ours-mlp-b32-r1-t2.loss.dat' using 1:2 with lines lw 2 lc 1 title 'mnist-train b32 r1', '/work/wt/lenet/bench/results/2026-11-23-vm-lenet/torch-mlp-b32-r1-t1.loss.dat' using 1:2 with lines lw 2 lc 2 title 'PyTorch b32 r1'
