//! Draws scripts/scaling.sh's CSV (ranks, wall_s, busbw_gbs, time_us) as an SVG: the job's wall
//! time and all_reduce's bus bandwidth at 1 MiB over the rank count.
//!
//!   cargo run --release --example scaling_plot -- results/scaling.csv docs/img/scaling.svg

use plotters::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (csv, svg) = match args.as_slice() {
        [_, c, s] => (c, s),
        _ => return Err("usage: scaling_plot CSV SVG".into()),
    };
    let text = std::fs::read_to_string(csv)?;
    let mut rows: Vec<(f64, f64, f64)> = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<f64> = line
            .split(',')
            .map(|x| x.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{csv}: '{line}': {e}"))?;
        if f.len() < 3 {
            return Err(format!("{csv}: '{line}': 4 columns expected").into());
        }
        rows.push((f[0], f[1], f[2]));
    }
    if rows.is_empty() {
        return Err(format!("{csv}: no rows").into());
    }
    let max_n = rows.iter().map(|r| r.0).fold(2.0, f64::max);
    let max_wall = rows.iter().map(|r| r.1).fold(0.0, f64::max) * 1.2;
    let max_bw = rows.iter().map(|r| r.2).fold(0.0, f64::max) * 1.2;
    let root = SVGBackend::new(svg, (720, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(360);
    for (area, title, max, pick, color) in [
        (&left, "job wall time (s)", max_wall, 1usize, BLUE),
        (
            &right,
            "all_reduce busbw at 1 MiB (GB/s)",
            max_bw,
            2usize,
            RED,
        ),
    ] {
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{title}, SIMULATED"), ("sans-serif", 15))
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(45)
            .build_cartesian_2d(0f64..max_n * 1.1, 0f64..max.max(1e-6))?;
        chart.configure_mesh().x_desc("ranks on one host").draw()?;
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .map(|r| (r.0, if pick == 1 { r.1 } else { r.2 }))
            .collect();
        chart.draw_series(LineSeries::new(pts.clone(), &color))?;
        chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
    }
    root.present()?;
    println!("scaling_plot: {svg}");
    Ok(())
}
