# netctl: tap devices and addresses (rtnetlink), added to libnetctl
