"""Pipeline glue every DVC stage and notebook uses: how a notebook builds its config (`notebook`), where every output
lives (`layout`: run folders, reports/), the digests stages depend on (`manifest`, `code_hash`), each method's option
sections (`method_params`), parameter sweeps over a notebook (`sweep`) and one writer per run, evaluation or sweep
folder (`folder_lock`)."""
