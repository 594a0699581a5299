// The partial plotly.js bundle the chart pages load (static/vendor/plotly/
// plotly-trainyard.min.js): plotly.js's core (which includes the scatter trace) and only
// the other trace types portal/charts.py draws. Add a trace type here (and rebuild with
// scripts/build-plotly-bundle.sh) before charts.py uses it.
'use strict';
var Plotly = require('plotly.js/lib/core');
Plotly.register([
    require('plotly.js/lib/indicator'),
    require('plotly.js/lib/histogram'),
    require('plotly.js/lib/heatmap')
]);
module.exports = Plotly;
