# netctl: filtering DNS resolver, added to libnetctl
