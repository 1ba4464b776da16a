# bench/plot.gp: draws gpu-async-bench's results (gnuplot 5).
#   gnuplot -e "stem='<dir>/gpu-async-bench'; out='<file>.png'; wu=1000; pp=64" plot.gp
# Left: store-to-handler latency CDF per strategy (the cell named by `cell`, from <stem>-cdf.csv).
# Right: CPU per waited second against p50 and p99 latency in the same cell (work `wu` us, `pp`
# pending, from <stem>.csv); one colour per strategy.
if (!exists("stem")) stem = "gpu-async-bench"
if (!exists("out")) out = stem.".png"
if (!exists("wu")) wu = 1000
if (!exists("pp")) pp = 64
cell = sprintf("%d us work, %d pending", wu, pp)

strategies = "ours-service ours-service+predict ours-fill ours-fill+predict callback-post timer-poll-50us timer-poll-1ms blocking-cv-thread spin-poll-thread"
colors = "#d62728 #ff7f0e #1f77b4 #17becf #2ca02c #9467bd #8c564b #e377c2 #7f7f7f"

set terminal pngcairo size 1600,620 font "DejaVu Sans,11" noenhanced
set output out
set datafile separator ","
set multiplot layout 1,2 title "gpu-async-bench: store-to-handler latency and waiting CPU (simulated device)"

set title "Latency CDF, ".cell
set logscale x
set xlabel "store-to-handler latency (us, log)"
set ylabel "fraction of completions"
set yrange [0:1]
set grid xtics ytics mxtics
set key bottom right font ",9"
plot for [i=1:4] stem."-cdf.csv" skip 1 \
     using (strcol(1) eq word(strategies,i) ? $3 : 1/0):2 \
     with lines lw 3 lc rgb word(colors,i) title word(strategies,i), \
     for [i=5:words(strategies)] stem."-cdf.csv" skip 1 \
     using (strcol(1) eq word(strategies,i) ? $3 : 1/0):2 \
     with lines lw 2 dt 2 lc rgb word(colors,i) title word(strategies,i)

set title "CPU per waited second vs latency, ".cell." (open: p50, filled: p99)"
set logscale xy
set xlabel "store-to-handler latency (us, log)"
set ylabel "CPU s/s, process less the device (log)"
set autoscale y
set key outside right top font ",9"
in_cell(s) = (strcol(3) eq s && $1 == wu && $2 == pp)
plot for [i=1:words(strategies)] stem.".csv" skip 1 \
     using (in_cell(word(strategies,i)) ? $5/1000 : 1/0):($10 > 0 ? $10 : 1e-4) \
     with points pt 6 ps 1.6 lc rgb word(colors,i) notitle, \
     for [i=1:words(strategies)] stem.".csv" skip 1 \
     using (in_cell(word(strategies,i)) ? $7/1000 : 1/0):($10 > 0 ? $10 : 1e-4) \
     with points pt 7 ps 1.6 lc rgb word(colors,i) title word(strategies,i)
unset multiplot
