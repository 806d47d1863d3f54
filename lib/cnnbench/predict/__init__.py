"""What would a model do on a device you don't have (issue 32): per-layer time from each op's FLOPs and bytes against
the device's roofs at fitted efficiencies, scored out of sample against every published and measured rate.

    model.predict(rows, fit)          the time model (:mod:`.model`): ceiling, predicted images/s, bound, shares
    score.spec_roof(device, prec)     a device of device_specs.csv at a precision (one-line refusals)
    table(merged)                     predictions.csv's rows: every seed's and merged run's rate, out of sample
    what_if(table, merged)            the merged runs' models on the params files' devices and a datacenter GPU
    one(model, device, ...)           ``cnnbench predict``: one prediction as a dict
    figure(table, path)               predicted against published or measured, log-log, y = x, by source
    findings(table)                   the goal figures and what the predictions say about the seeds
"""
