set terminal pngcairo size 800,500 noenhanced
set output '/work/main/bench/results/2026-11-23-vm/loss-seed-b32-r1.png'
set title 'MNIST seed-b32-r1: training loss (rank 0 batch) against training time'
set xlabel 'seconds of training'
set ylabel 'loss'
set logscale x
set grid
plot '/work/main/bench/results/2026-11-23-vm/ours-seed-b32-r1-t2.loss.dat' using 1:2 with lines lw 2 lc 1 title 'mnist-train b32 r1', '/work/main/bench/results/2026-11-23-vm/torch-seed-b32-r1-t1.loss.dat' using 1:2 with lines lw 2 lc 2 title 'PyTorch b32 r1'
