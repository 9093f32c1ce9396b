set terminal pngcairo size 860,560 noenhanced
set output '/work/wt-adamw/bench/results/2026-11-24-vm-adamw/loss-lenet-b64-r1.png'
set title "MNIST lenet-b64-r1: training loss (rank 0 batch)\nagainst training time"
set xlabel 'seconds of training'
set ylabel 'loss'
set logscale x
set key below horizontal height 1
set grid
plot '/work/wt-adamw/bench/results/2026-11-24-vm-adamw/ours-lenet-b64-r1-t2.loss.dat' using 1:2 with lines lw 2 lc 1 title 'mnist-train b64 r1', '/work/wt-adamw/bench/results/2026-11-24-vm-adamw/torch-lenet-b64-r1-t1.loss.dat' using 1:2 with lines lw 2 lc 2 title 'PyTorch b64 r1'
